"""The settings of an evaluation: one value, checked once, taken whole by every door.

`run`, sweep files, `sandbox`, `mcp`, `mcp --task`, `realprobe.evaluate` and the Inspect
task all build one `EvalSettings` and hand it on; the runs' `RunConfig` comes from it in one
place (`run_config`), so no door can drop a setting on the way. A door that cannot honour a
setting refuses it (`refuse_unless`) before anything runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, model_validator

from realprobe.clients import TransportOptions, check_seed
from realprobe.errors import RealprobeError, renamed_keyword
from realprobe.http.mode import Mode

if TYPE_CHECKING:
    from realprobe.tasks.runner import RunConfig

#: record and replay runs use each task's own cassette (checked per task, later)
PER_TASK_CASSETTE = "<each task's cassette>"
#: what a door serving tools takes (the rest it refuses in one line), and a sandbox
TOOL_SETTINGS = ("mode", "sandbox", "profile", "cassette", "seed", "fault_plan", "fault_rate")
SANDBOX_SETTINGS = ("profile", "seed", "fault_plan", "fault_rate")


class EvalSettings(BaseModel):
    """Where calls go (mode, sandbox, profile, cassette, seed, fault plan, fault rate) and
    what the agent is shown (prompt, flaw seed, paraphrase level). `prompt` None: the
    door's default (optimal for the reference agent, baseline for the others)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Mode = Mode.LIVE
    sandbox: str | None = None
    profile: str | Path | None = None
    cassette: str | Path | None = None
    seed: int = 0
    fault_plan: str | Path | None = None
    fault_rate: float | None = None
    prompt: str | None = None
    flaw_seed: int = 0
    paraphrase: int = 0

    @model_validator(mode="before")
    @classmethod
    def _mode(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("mode"), str):
            data = {**data, "mode": Mode.parse(data["mode"])}
        return data

    @model_validator(mode="after")
    def _check(self) -> EvalSettings:
        """Every setting checked by its one home, before anything runs."""
        from realprobe.tasks.paraphrase import paraphrase_text
        from realprobe.tasks.prompts import prompt_variants

        try:
            self.target()
            check_seed(self.flaw_seed, "flaw_seed")
            if self.prompt is not None:
                prompt_variants(self.prompt)
            if self.paraphrase not in (0, 1, 2):
                paraphrase_text("", self.paraphrase)
        except ValueError as exc:  # BadArgument is one: pydantic would wrap it
            raise RealprobeError(str(exc), param=getattr(exc, "params", ())) from None
        return self

    @classmethod
    def given(
        cls, settings: EvalSettings | None = None, target: TransportOptions | None = None,
        *, outside: bool = False, **fields: Any,
    ) -> EvalSettings:
        """`settings`, or the settings of `target` (`options(...)`) and the other fields as
        keywords (`simulate=` is profile's old name); a field given twice with two values is
        an error, not a silent pick. `outside` (an outside agent's runs): the published
        simulate profile and the baseline prompt unless given."""
        renamed_keyword(fields, "simulate", "profile")
        for name in set(fields) - set(cls.model_fields):
            raise TypeError(f"unexpected keyword argument {name!r}")
        if settings is not None and (target is not None or fields):
            raise RealprobeError("give settings, or its fields as keywords, not both",
                                 param="settings")
        if settings is None:
            where = {} if target is None else {k: getattr(target, k) for k in TOOL_SETTINGS}
            if not all(isinstance(where.get(k), str | Path | None)
                       for k in ("profile", "fault_plan")):
                raise RealprobeError("give the profile and fault plan by name or file",
                                     param=("profile", "fault_plan"))
            for name, value in fields.items():
                default = cls.model_fields[name].default
                if value != default and where.get(name, default) not in (default, value):
                    raise RealprobeError(f"{name} is given twice, {value!r} and the target's "
                                         f"{where[name]!r}", param=name)
            if outside and target is None and not set(fields) & {*TOOL_SETTINGS} - {"seed"}:
                where["mode"] = Mode.SIMULATE
            settings = cls(**where | {k: v for k, v in fields.items()
                                      if k not in where or v != cls.model_fields[k].default})
        if outside and settings.prompt is None:
            settings = settings.model_copy(update={"prompt": "baseline"})
        return settings

    def target(self) -> TransportOptions:
        """Where the calls go, checked by the one check of that (`TransportOptions`)."""
        cassette = self.cassette
        if cassette is None and self.mode in (Mode.RECORD, Mode.REPLAY):
            cassette = PER_TASK_CASSETTE
        return TransportOptions(
            mode=self.mode, sandbox=self.sandbox, profile=self.profile, cassette=cassette,
            seed=self.seed, fault_plan=self.fault_plan, fault_rate=self.fault_rate,
        ).normalised()

    def refuse_unless(self, door: str, honoured: tuple[str, ...]) -> None:
        """One line, before anything runs, naming the settings `door` cannot honour."""
        extra = [n for n, f in type(self).model_fields.items()
                 if getattr(self, n) != f.default and n not in honoured]
        if extra:
            raise RealprobeError(
                f"{door} cannot honour {', '.join(extra)} (it takes {', '.join(honoured)})",
                param=tuple(extra),
            )

    def run_config(self, *, default_prompt: str = "baseline", **rest: Any) -> RunConfig:
        """The runs' configuration: every setting carried over, the rest as given."""
        from realprobe.tasks.prompts import prompt_variants
        from realprobe.tasks.runner import RunConfig

        opts = self.target()
        return RunConfig(
            prompts=prompt_variants(self.prompt or default_prompt), mode=opts.mode,
            sandbox=opts.sandbox, profile=None if opts.profile is None else str(opts.profile),
            cassette=None if self.cassette is None else Path(self.cassette), seed=self.seed,
            fault_plan=None if self.fault_plan is None else str(self.fault_plan),
            fault_rate=self.fault_rate, flaw_seed=self.flaw_seed, paraphrase=self.paraphrase,
            **rest,
        )


__all__ = ["SANDBOX_SETTINGS", "TOOL_SETTINGS", "EvalSettings"]
