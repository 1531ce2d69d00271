"""The reference agent: follows the workflow with retries and fallbacks, composes from real
results. The paper's bound (iii): what a policy that knows the failure modes can reach.

Per step: the step's tool, retried on retryable errors with tenacity (exponential backoff
with seeded jitter, Retry-After honoured, at most `max_retries` retries, never past the
task deadline), then each alternative tool the same way. An `ok` answer that fails the
checks of the implicit faults (`answer_checks`: a needed output blank or missing, a text
that reads backwards) counts as failed the same way. Waits use the run's clock, so
simulate and replay runs never sleep for real. Under a `flawed:<type>` prompt it follows the
flawed workflow literally, which measures what each flaw costs an agent that trusts its plan.
Under `baseline`, `cot` and `failure-unaware` (no workflow shown) it does the steps in the
order the task's text names them, each after the steps whose outputs it reads
(`paraphrase.text_order`).
"""

from __future__ import annotations

from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt
from tenacity.stop import stop_any, stop_base

from realprobe.errors import ErrorCode
from realprobe.tasks.agents.answer_checks import suspect
from realprobe.tasks.agents.base import AgentContext
from realprobe.tasks.model import Arg, Outputs, Step
from realprobe.tasks.paraphrase import text_order
from realprobe.tasks.prompts import TEXT_ONLY
from realprobe.tasks.state import COMPLETION_PHRASE, LOOP_REPEATS, StepRecord
from realprobe.tasks.values import Produced, extract_outputs, resolve_args


def _retryable(rec: StepRecord) -> bool:
    if rec.ok or rec.error_code is None:
        return False
    return ErrorCode(rec.error_code).retryable


class ReferenceAgent:
    name = "reference"
    model = "reference"

    async def run(self, ctx: AgentContext) -> None:
        steps = ctx.task.steps_for(ctx.prompt)
        if ctx.prompt in TEXT_ONLY:  # no workflow shown: the text's order
            at = {s.id: s for s in steps}
            steps = [at[i] for i in text_order(ctx.task, ctx.task.description)]
        literal = ctx.prompt.startswith("flawed:")
        produced: Produced = {}
        failed: list[str] = []
        output_ok = False
        for turn, step in enumerate(steps, 1):
            ctx.state.turns = turn
            rec = await self._step(ctx, step, produced, turn, literal)
            if rec is None or not rec.ok:
                failed.append(step.id)
            elif rec.kind == "output":
                output_ok = True
        if output_ok and not failed:
            ctx.state.final_message = (
                f"{COMPLETION_PHRASE}: {ctx.state.artifact_tool} stored "
                f"{len(ctx.state.artifact or '')} characters from {len(steps) - 1} tool results."
            )
            ctx.state.completion_signal = True
        else:
            ctx.state.final_message = "Stopped with steps not done: " + ", ".join(failed)

    async def _step(
        self, ctx: AgentContext, step: Step, produced: Produced, turn: int, literal: bool
    ) -> StepRecord | None:
        candidates: list[tuple[str, dict[str, Arg], Outputs]] = [
            (step.tool, step.args, step.outputs),
            *((a.tool, a.args, a.outputs) for a in step.alternatives),
        ]
        last: StepRecord | None = None
        doubtful: tuple[StepRecord, dict[str, Any]] | None = None
        for n, (tool, args, outputs) in enumerate(candidates):
            values, missing = resolve_args(args, ctx.task.inputs, produced)
            if missing and not literal and tool not in ("compose_post", "save_report"):
                continue  # an upstream step failed: nothing sensible to send
            wanted = [] if literal else list(outputs)
            last = await self._with_retries(
                ctx, step.id, tool, values, turn, first_role="fallback" if n else "call",
                outputs=outputs, wanted=wanted,
            )
            if last.ok:
                got = extract_outputs(outputs, last.data)
                if suspect(got, wanted, last.data) is None:
                    produced[step.id] = got
                    return last
                doubtful = doubtful or (last, got)  # an implicit fault, it seems: go on
        if doubtful is not None:  # every tool answered doubtfully: the first such answer
            produced[step.id] = doubtful[1]
            return doubtful[0]
        return last

    async def _with_retries(
        self,
        ctx: AgentContext,
        step_id: str,
        tool: str,
        args: dict[str, Any],
        turn: int,
        first_role: str,
        outputs: Outputs,
        wanted: list[str],
    ) -> StepRecord:
        """The call, retried on a retryable error or an answer that fails the checks of a
        tool's implicit faults (`answer_checks.suspect`: a transient one clears)."""
        limits = ctx.task.constraints
        attempts = [0]

        doubts = [0]

        def again(rec: StepRecord) -> bool:
            if _retryable(rec):
                return True
            if not rec.ok or rec.kind != "api":
                return False
            if suspect(extract_outputs(outputs, rec.data), wanted, rec.data) is None:
                return False
            doubts[0] += 1  # asked again once: a third identical answer would be a loop
            return doubts[0] < LOOP_REPEATS - 1

        async def attempt() -> StepRecord:
            role = first_role if attempts[0] == 0 else "retry"
            attempts[0] += 1
            return await ctx.box.call(tool, dict(args), turn=turn, role=role, step_id=step_id)

        def wait(rs: RetryCallState) -> float:
            rec: StepRecord = rs.outcome.result()  # type: ignore[union-attr]
            if rec.ok:
                return 0.0  # a doubtful answer: ask again at once
            if rec.retry_after_s is not None:
                return rec.retry_after_s
            backoff = min(
                limits.backoff_max_s, limits.backoff_base_s * 2 ** (rs.attempt_number - 1)
            )
            return backoff + ctx.rng.uniform(0, limits.backoff_base_s)

        class too_long(stop_base):
            """A Retry-After beyond the deadline: switch tools now instead of waiting."""

            def __call__(self, rs: RetryCallState) -> bool:
                rec: StepRecord = rs.outcome.result()  # type: ignore[union-attr]
                return (rec.retry_after_s or 0.0) >= ctx.box.time_left()

        retrying = AsyncRetrying(
            stop=stop_any(stop_after_attempt(limits.max_retries + 1), too_long()),
            wait=wait,
            retry=retry_if_result(again),
            sleep=ctx.box.sleep,
            retry_error_callback=lambda rs: rs.outcome.result(),  # type: ignore[union-attr]
        )
        result: StepRecord = await retrying(attempt)
        return result
