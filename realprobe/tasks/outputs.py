"""Local output tools: they run in process and store the task's final artifact in the run state.

They are offered to agents beside the catalogue tools; their names match the paper's
output-tool pattern (post, report, save...) so scoring recognises them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ComposePost(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, description="The full text of the post")
    hashtags: list[str] = Field(default_factory=list, description="Optional hashtags")


class SaveReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1, description="Report title")
    body: str = Field(min_length=1, description="The full report text")


@dataclass(frozen=True)
class OutputTool:
    name: str
    title: str
    description: str
    model: type[BaseModel]

    @property
    def input_schema(self) -> dict[str, Any]:
        return self.model.model_json_schema()

    def openai_definition(self, *, strict: bool = False) -> dict[str, Any]:
        from realprobe.adapters.exports import strict_schema

        function: dict[str, Any] = {
            "name": self.name,
            "description": f"{self.title}. {self.description}",
            "parameters": strict_schema(self.input_schema) if strict else self.input_schema,
        }
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def artifact(self, args: dict[str, Any]) -> str:
        """The stored artifact text; raises pydantic.ValidationError on bad arguments."""
        data = self.model.model_validate(args)
        if isinstance(data, ComposePost):
            tags = " ".join("#" + t.lstrip("#") for t in data.hashtags)
            return data.text + (f"\n{tags}" if tags else "")
        assert isinstance(data, SaveReport)
        return f"{data.title}\n\n{data.body}"


OUTPUT_TOOLS: dict[str, OutputTool] = {
    t.name: t
    for t in (
        OutputTool(
            "compose_post",
            "Compose a social-media post",
            "Store the final post draft (the task's result). Put every gathered item in `text`.",
            ComposePost,
        ),
        OutputTool(
            "save_report",
            "Save a report",
            "Store the final report (the task's result) with a title and a body holding every "
            "gathered item.",
            SaveReport,
        ),
    )
}

__all__ = ["OUTPUT_TOOLS", "OutputTool", "ValidationError"]
