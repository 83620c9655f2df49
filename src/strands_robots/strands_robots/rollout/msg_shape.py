"""Message dicts shaped for the CDR encoder, checked against their installed .msg definitions (no rclpy)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Mapping

from strands_robots.rollout.msg_schema import FieldSpec, MsgDefinitionNotFound, MsgDefinitions

__all__ = ["MessageShapeError", "MessageShaper"]


class MessageShapeError(ValueError):
    """A message dict does not fit its definition (or the definition is not installed)."""


class MessageShaper:
    """Shapes message dicts of any installed type (field lists read once per type)."""

    def __init__(self, definitions: MsgDefinitions) -> None:
        self._definitions = definitions
        self._fields: dict[str, dict[str, FieldSpec]] = {}

    def shape(self, type_name: str, value: Any) -> SimpleNamespace:
        """Check a message dict against its definition and shape it as the CDR encoder needs it.

        Every field name must exist in the .msg (a misspelt field would otherwise be recorded silently as its
        default). Nested messages become namespaces, never dicts: the encoder falls back to
        ``getattr(msg, field)``, so a dict standing in for a missing ``ScoringSheetDefinition`` would hand it
        the dict's ``items`` method. Missing primitive fields and arrays get their defaults.
        """
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            raise MessageShapeError(f"a {type_name} must be given as a mapping, got {type(value).__name__}")
        fields = self._fields.get(type_name)
        if fields is None:
            try:
                fields = {f.name: f for f in self._definitions.fields(type_name)}
            except (MsgDefinitionNotFound, ValueError) as exc:
                raise MessageShapeError(f"cannot record {type_name}: {exc}") from exc
            self._fields[type_name] = fields
        unknown = [str(k) for k in value if k not in fields]
        if unknown:
            raise MessageShapeError(f"{type_name} has no field {', '.join(sorted(unknown))}")
        out: dict[str, Any] = {}
        for name, spec in fields.items():
            item = value.get(name)
            if spec.message_type:
                if spec.is_array:
                    out[name] = [self.shape(spec.message_type, v) for v in (item or ())]
                else:
                    out[name] = self.shape(spec.message_type, item)
            elif item is not None:
                out[name] = list(item) if isinstance(item, tuple) else item
        return SimpleNamespace(**out)
