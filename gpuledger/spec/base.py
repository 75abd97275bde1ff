"""The models every spec kind shares: strict fields (unknown keys refused, frozen) and the header of
a spec (name, project, owner, model, precision) with the positions its fields came from."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from gpuledger.spec.types import LABEL_PATTERN, NAME_PATTERN
from gpuledger.vocabulary import Precision, precision_name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _SpecBase(_Strict):
    name: str = Field(pattern=NAME_PATTERN, description="[a-z0-9-]+; used in file names")
    project: str = Field(pattern=LABEL_PATTERN)
    owner: str = Field(pattern=LABEL_PATTERN)
    model: str = Field(min_length=1, description="a registry name, or a path to an HF config.json")
    precision: Precision = "bf16"

    @field_validator("precision", mode="before")
    @classmethod
    def _precision(cls, value):
        return precision_name(value)

    _positions: dict[tuple, tuple[int, int]] = PrivateAttr(default_factory=dict)
    _source: str = PrivateAttr(default="<spec>")

    def position(self, *path: str | int) -> tuple[str, int, int]:
        """Returns (file, line, column) of a field, or of its nearest located parent."""
        key = tuple(path)
        while key and key not in self._positions:
            key = key[:-1]
        line, col = self._positions.get(key, (1, 1))
        return self._source, line, col
