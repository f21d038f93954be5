"""The last tier of the lowering: any list whose elements have a known rank becomes tensors.

`find_lists` (components) says which lists can, `ListForms` (forms) emits the tensor form of
each sequence operator, and `lower_lists` (convert) rewrites a whole model.
"""

from seqlower.lists.components import ListPlan, find_lists
from seqlower.lists.convert import ListsLowered, lower_lists
from seqlower.lists.forms import FlatList, ListForms

__all__ = ["FlatList", "ListForms", "ListPlan", "ListsLowered", "find_lists", "lower_lists"]
