"""Setting one protobuf field of a message from the value `ListFields` gave for it."""

from __future__ import annotations

__all__ = ["set_field"]

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message


def set_field(target: Message, field: FieldDescriptor, value: object) -> None:
    """Give `target` the `value` of `field` (a message copied, a scalar set, a repeated field
    extended), as `source.ListFields()` lists it."""
    if isinstance(value, Message):
        getattr(target, field.name).CopyFrom(value)
    elif isinstance(value, (str, bytes, int, float)):
        setattr(target, field.name, value)
    else:  # a repeated field
        getattr(target, field.name).extend(value)
