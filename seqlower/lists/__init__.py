"""The last tier of the lowering: any list whose elements have a known rank becomes tensors,
and, for the targets that take ranks known only at run time, any other list too.

`find_lists` (components) says which lists can and in which layout (tensors: stacked, ragged,
flat or unranked), `ListForms` (forms, with one module per layout) emits the tensor form of each
sequence operator, and `lower_lists` (convert) rewrites a whole model.
"""

from seqlower.lists.components import ListPlan, find_lists
from seqlower.lists.convert import ListsLowered, lower_lists
from seqlower.lists.forms import ListForms
from seqlower.lists.tensors import Layout, TensorList

__all__ = [
    "Layout",
    "ListForms",
    "ListPlan",
    "ListsLowered",
    "TensorList",
    "find_lists",
    "lower_lists",
]
