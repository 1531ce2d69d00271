"""The profile format (`realprobe-profile/1`): one pydantic model writes it, reads it, and
drives faults."""

from __future__ import annotations

import math
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from realprobe.errors import ErrorCode, RealprobeError
from realprobe.limits import read_document
from realprobe.outputs import write_output
from realprobe.ranges import checked
from realprobe.simulator.toxics import Toxic

FORMAT = "realprobe-profile/1"
Z90 = 1.2815515655446004


class ProfileError(RealprobeError):
    pass


#: the slowest latency a profile may describe (about 11.6 days): beyond it a value is a typo
#: or an attack, and drawing from it would only ever time out
MAX_LATENCY_MS = 1e9
#: the longest Retry-After a profile may hold (a day)
MAX_RETRY_AFTER_S = 86_400.0


class _Model(BaseModel):
    """A part of a profile: unknown keys and non-finite numbers (NaN, Infinity) are refused,
    whether the profile comes from a file or from the sandbox's `/_admin/profile`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Lognormal(_Model):
    mu: float = Field(ge=-25, le=25)  # log-milliseconds: e^25 ms is past MAX_LATENCY_MS
    sigma: float = Field(gt=0, le=10)


class MixtureComponent(_Model):
    """One lognormal of a latency mixture, with its weight."""

    weight: float = Field(gt=0, le=1)
    mu: float = Field(ge=-25, le=25)
    sigma: float = Field(gt=0, le=10)


class LatencyModel(_Model):
    """Latency of successful calls in milliseconds."""

    p50: float | None = Field(default=None, ge=0, le=MAX_LATENCY_MS)
    p90: float | None = Field(default=None, ge=0, le=MAX_LATENCY_MS)
    p95: float | None = Field(default=None, ge=0, le=MAX_LATENCY_MS)
    p99: float | None = Field(default=None, ge=0, le=MAX_LATENCY_MS)
    mean: float | None = Field(default=None, ge=0, le=MAX_LATENCY_MS)
    lognormal: Lognormal | None = None
    #: a mixture of lognormals (a cache hit and a miss, say); when present the simulator
    #: draws from it, and `lognormal` stays the one-component summary for older readers
    mixture: list[MixtureComponent] | None = None
    #: how the mixture was chosen (components tried and their BIC), written by calibrate
    mixture_fit: dict[str, Any] | None = None
    ks_pvalue: float | None = None

    @field_validator("mixture")
    @classmethod
    def _weights_normalised(cls, v: list[MixtureComponent] | None) -> list[MixtureComponent] | None:
        if v is None:
            return None
        if not v:
            raise ValueError("a latency mixture needs at least one component")
        total = sum(c.weight for c in v)
        return [c.model_copy(update={"weight": c.weight / total}) for c in v]

    def components(self) -> list[tuple[float, float, float]]:
        """(weight, mu, sigma) of ln(latency_ms): the mixture, else the one lognormal."""
        if self.mixture:
            return [(c.weight, c.mu, c.sigma) for c in self.mixture]
        mu, sigma = self.params()
        return [(1.0, mu, sigma)]

    def survival(self, t_ms: float) -> float:
        """P(latency > t_ms) under the model the simulator draws from (the mixture if any)."""
        if t_ms <= 0:
            return 1.0
        lt = math.log(t_ms)
        return sum(
            w * 0.5 * math.erfc((lt - mu) / (sigma * math.sqrt(2.0)))
            for w, mu, sigma in self.components()
        )

    def scaled_by(self, k: float) -> LatencyModel:
        """Every latency drawn from it times `k` (the same random draws: ln k added to each
        component's mu), its quantiles and mean too; `k` 0 makes them all about 0."""
        if k == 1:
            return self
        shift = math.log(k) if k > 0 else -math.inf
        mu, sigma = self.params()
        update: dict[str, Any] = {"lognormal": Lognormal(mu=max(-25.0, mu + shift), sigma=sigma)}
        if self.mixture:
            update["mixture"] = [c.model_copy(update={"mu": max(-25.0, c.mu + shift)})
                                 for c in self.mixture]
        for q in ("p50", "p90", "p95", "p99", "mean"):
            value = getattr(self, q)
            if value is not None:
                update[q] = min(MAX_LATENCY_MS, value * k)
        return self.model_copy(update=update)

    def params(self) -> tuple[float, float]:
        """(mu, sigma) of ln(latency_ms): the fit if present, else from p50/p90."""
        if self.lognormal is not None:
            return self.lognormal.mu, self.lognormal.sigma
        p50 = self.p50 or 200.0
        if self.p90 and self.p90 > p50:
            return math.log(p50), (math.log(self.p90) - math.log(p50)) / Z90
        return math.log(p50), 0.5


def probability_interval(
    what: str, ci: tuple[float, float] | None
) -> tuple[float, float] | None:
    """`ci` itself, or a ValueError naming `what` when it is no interval of a probability."""
    if ci is not None and not 0 <= ci[0] <= ci[1] <= 1:
        raise ValueError(f"{what} [{ci[0]:g}, {ci[1]:g}] must satisfy 0 <= low <= high <= 1")
    return ci


class Burst(_Model):
    """A two-state chain: failures come in runs."""

    p_fail_after_fail: float = Field(ge=0, le=1)
    p_fail_after_ok: float = Field(ge=0, le=1)
    #: 95% intervals of the two transitions where calibration gives them: the observed
    #: transitions' Wilson intervals, or behind a deadline that bites the fitted chain's
    #: (P(fail|ok)'s then follows from P(fail|fail)'s and the success interval's ends)
    p_fail_after_fail_ci95: tuple[float, float] | None = None
    p_fail_after_ok_ci95: tuple[float, float] | None = None

    @field_validator("p_fail_after_fail_ci95", "p_fail_after_ok_ci95")
    @classmethod
    def _intervals(
        cls, v: tuple[float, float] | None, info: ValidationInfo
    ) -> tuple[float, float] | None:
        return probability_interval(f"the interval {info.field_name}", v)

    @property
    def stationary_fail(self) -> float:
        denom = 1.0 - self.p_fail_after_fail + self.p_fail_after_ok
        return self.p_fail_after_ok / denom if denom > 0 else 1.0


class RetryAfter(_Model):
    """Retry-After of one failure code: the share of those failures that carried the header,
    and the values seen (seconds) with their weights; the simulator draws from them."""

    n: int = 0
    share: float = Field(ge=0, le=1)
    share_ci95: tuple[float, float] | None = None
    values: list[tuple[float, float]] = Field(default_factory=list)
    #: per value (same order), the 95% Wilson interval of its weight among the headers seen
    weights_ci95: list[tuple[float, float]] | None = None

    @field_validator("values")
    @classmethod
    def _positive(cls, v: list[tuple[float, float]]) -> list[tuple[float, float]]:
        if any(s < 0 or w < 0 for s, w in v):
            raise ValueError("Retry-After values and weights must be >= 0")
        if any(s > MAX_RETRY_AFTER_S for s, _ in v):
            raise ValueError(f"Retry-After values must be at most {MAX_RETRY_AFTER_S:g} s")
        total = sum(w for _, w in v)
        return [(s, w / total) for s, w in v] if total > 0 else []

    @field_validator("share_ci95")
    @classmethod
    def _share_interval(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        return probability_interval("the Retry-After share's interval", v)

    @model_validator(mode="after")
    def _weight_intervals(self) -> RetryAfter:
        if self.weights_ci95 is None:
            return self
        if len(self.weights_ci95) != len(self.values):
            raise ValueError(
                f"weights_ci95 has {len(self.weights_ci95)} intervals for "
                f"{len(self.values)} Retry-After values: give one per value, in their order"
            )
        for (sec, _), ci in zip(self.values, self.weights_ci95, strict=True):
            probability_interval(f"the interval of the {sec:g} s weight", ci)
        return self


class McpFailureForms(_Model):
    """How an MCP server's failures of one tool or method come back (calibrated from MCP
    rows): the share answered as JSON-RPC errors rather than `isError` results, and the
    latency of failed calls; `realprobe mcp proxy` answers its injected failures so."""

    #: failures the shares were measured from
    n: int = 0
    jsonrpc_share: float = Field(ge=0, le=1)
    jsonrpc_share_ci95: tuple[float, float] | None = None
    error_latency_ms: LatencyModel | None = None

    @field_validator("jsonrpc_share_ci95")
    @classmethod
    def _share_interval(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        return probability_interval("the JSON-RPC share's interval", v)


#: how far success_rate may sit from the burst chain's long-run success before the profile is
#: refused as self-contradictory (a calibrated profile matches them exactly)
CHAIN_TOLERANCE = 0.02


class ToolProfile(_Model):
    n: int = 0
    success_rate: float = Field(ge=0, le=1)
    success_ci95: tuple[float, float] | None = None
    #: the long-run interval: day-to-day variation included (random effects over days)
    success_long_run_ci95: tuple[float, float] | None = None
    errors: dict[ErrorCode, float] = Field(default_factory=dict)
    #: per code, the 95% interval of its share of failures (on the scale of `errors`: behind
    #: a deadline, of the generated failures); the effective number of failures is smaller
    #: than their count when an outage repeats one code
    errors_ci95: dict[ErrorCode, tuple[float, float]] | None = None
    latency_ms: LatencyModel = Field(default_factory=LatencyModel)
    burst: Burst | None = None
    #: P(a failure right after a failure repeats its code) beyond chance: with c, the next
    #: failure's code is the previous one with probability c + (1 - c) w(previous code)
    code_persistence: float | None = Field(default=None, ge=0, le=1)
    code_persistence_ci95: tuple[float, float] | None = None
    #: sd of the day effect on the logit of the failure rate (UTC days); the simulator draws one
    #: effect per tool and day, around the centre whose mean over days is success_rate
    daily_logit_sd: float | None = Field(default=None, ge=0)
    daily_logit_sd_ci95: tuple[float, float] | None = None
    #: P(a call hangs): the TIMEOUT share of failures behind a deadline that bites, with its
    #: interval; a note in words when hangs cannot be told from slow calls
    hang_rate: float | None = Field(default=None, ge=0, le=1)
    hang_rate_ci95: tuple[float, float] | None = None
    notes: list[str] = Field(default_factory=list)
    #: Retry-After per failure code, measured from the rows
    retry_after: dict[ErrorCode, RetryAfter] = Field(default_factory=dict)
    #: an MCP tool's or method's failure forms (JSON-RPC error or isError result) and latency
    mcp: McpFailureForms | None = None

    @field_validator("errors_ci95")
    @classmethod
    def _share_intervals(
        cls, v: dict[ErrorCode, tuple[float, float]] | None
    ) -> dict[ErrorCode, tuple[float, float]] | None:
        for code, ci in (v or {}).items():
            probability_interval(f"the interval of {code.value}'s share", ci)
        return v

    @model_validator(mode="after")
    def _errors_normalised(self) -> ToolProfile:
        if any(v < 0 for v in self.errors.values()):
            raise ValueError("error shares must be >= 0")
        total = sum(self.errors.values())
        if self.success_rate < 1 and total <= 0:
            raise ValueError("success_rate < 1 needs a non-empty `errors` mix")
        if total > 0:
            self.errors = {k: v / total for k, v in self.errors.items()}
        if self.burst is not None:
            chain = 1.0 - self.burst.stationary_fail
            if abs(chain - self.success_rate) > CHAIN_TOLERANCE:
                raise ValueError(
                    f"success_rate {self.success_rate:g} contradicts the burst chain, whose "
                    f"long-run success is {chain:.3f} (P(fail|fail) "
                    f"{self.burst.p_fail_after_fail:g}, P(fail|ok) "
                    f"{self.burst.p_fail_after_ok:g}); make them agree (P(fail|ok) = "
                    "f(1-rho), P(fail|fail) = P(fail|ok) + rho for failure rate f) or drop one"
                )
        return self


# -- implicit faults, the failure rule and the fault-rate dial (the simulator's own section,
# apart from the per-tool statistics above) ------------------------------------------------

#: answers that look fine (HTTP 200, the client sees ok) but whose content is wrong
IMPLICIT_VARIANTS = ("stale", "empty", "wrong", "drift")
ImplicitVariant = Literal["stale", "empty", "wrong", "drift"]

#: how a tool's failure chance is decided call by call
FailureRule = Literal["burst", "resilibench-paper", "resilibench-code"]

#: ResiliBench's rule over the task's history (every tool of the run): success chance times
#: 0.9 per counted failure; its code counts the last three calls once the history holds three
#: and clamps to [0.1, 0.95], its paper counts every earlier failure of the task. Both lower
#: it by 0.5 per dependency not yet satisfied and 0.7 per dependency whose last call failed.
RB_PENALTY = 0.9
RB_WINDOW = 3
RB_CLAMP = (0.1, 0.95)
RB_UNCALLED = 0.5
RB_FAILED_DEP = 0.7
RB_RULES = ("resilibench-paper", "resilibench-code")


def resilibench_marginal(base: float) -> float:
    """The long-run share of successes ResiliBench's simulator produces for a tool called
    over and over with tool_success_rate `base`: the stationary law of the chain on the last
    three outcomes."""
    import itertools

    import numpy as np

    states = list(itertools.product((0, 1), repeat=RB_WINDOW))  # 1 = failed
    index = {st: i for i, st in enumerate(states)}
    probs = [min(max(base * RB_PENALTY ** sum(st), RB_CLAMP[0]), RB_CLAMP[1]) for st in states]
    trans = np.zeros((len(states), len(states)))
    for st, q in zip(states, probs, strict=True):
        trans[index[st], index[(*st[1:], 0)]] += q
        trans[index[st], index[(*st[1:], 1)]] += 1 - q
    # stationary distribution: left eigenvector for eigenvalue 1
    a = np.vstack([trans.T - np.eye(len(states)), np.ones(len(states))])
    b = np.zeros(len(states) + 1)
    b[-1] = 1.0
    pi = np.linalg.lstsq(a, b, rcond=None)[0]
    return float(np.dot(pi, probs))


def resilibench_base(marginal: float) -> tuple[float, bool]:
    """The tool_success_rate whose simulated long-run success is `marginal`, and whether that
    is reachable (the clamp caps the long-run rate at about 0.94 and floors it at 0.1)."""
    from scipy import optimize

    lo, hi = resilibench_marginal(0.0), resilibench_marginal(1.0)
    if marginal <= lo:
        return 0.0, marginal >= lo - 1e-9
    if marginal >= hi:
        return 1.0, marginal <= hi + 1e-9
    return float(optimize.brentq(lambda b: resilibench_marginal(b) - marginal, 0.0, 1.0)), True

#: the error mix given to a tool that has none when `scaled` makes it fail (the fault kinds
#: a chaos-style injector uses: timeouts, rate limits, partial responses, schema drift)
DIAL_MIX: dict[ErrorCode, float] = {
    ErrorCode.TIMEOUT: 0.25,
    ErrorCode.RATE_LIMIT_ERROR: 0.25,
    ErrorCode.NETWORK_ERROR: 0.25,
    ErrorCode.INVALID_RESPONSE: 0.25,
}


class ImplicitFaults(_Model):
    """How often a tool's successful answers are quietly wrong, per variant (a share of the
    successful calls), and how many of those faults persist for the rest of the run."""

    rates: dict[ImplicitVariant, float] = Field(default_factory=dict)
    #: share of implicit faults that are permanent: once met, the tool keeps answering that way
    permanent: float = Field(default=0.0, ge=0, le=1)

    @field_validator("rates")
    @classmethod
    def _rates_valid(cls, v: dict[str, float]) -> dict[str, float]:
        if any(not 0 <= r <= 1 for r in v.values()):
            raise ValueError("implicit-fault rates must be between 0 and 1")
        if sum(v.values()) > 1 + 1e-9:
            raise ValueError("implicit-fault rates must add up to at most 1")
        return v

    @property
    def total(self) -> float:
        return sum(self.rates.values())


def chain_with_rate(burst: Burst | None, rate: float) -> Burst:
    """A two-state chain with long-run failure share `rate` and the lag-one correlation
    rho = P(fail|fail) - P(fail|ok) of `burst` (0 without one): P(fail|ok) = rate(1 - rho),
    P(fail|fail) = P(fail|ok) + rho, with rho moved into the range that keeps both in [0, 1]."""
    rho = burst.p_fail_after_fail - burst.p_fail_after_ok if burst is not None else 0.0
    if rate < 1:
        rho = max(rho, -rate / (1 - rate))
    if rate > 0:
        rho = max(rho, 1 - 1 / rate)
    rho = min(rho, 1.0)
    fo = min(1.0, max(0.0, rate * (1 - rho)))
    return Burst(p_fail_after_fail=min(1.0, max(0.0, fo + rho)), p_fail_after_ok=fo)


def scale_tool(tp: ToolProfile, lam: float) -> ToolProfile:
    """The tool with failure share `lam`: its error mix and its burst correlation kept (a
    tool with no mix gets DIAL_MIX), its day-to-day effect dropped (a run on any one day
    meets `lam`, not that day's share)."""
    errors = dict(tp.errors) or dict(DIAL_MIX)
    burst = chain_with_rate(tp.burst, lam) if tp.burst is not None and lam > 0 else None
    return tp.model_copy(update={
        "success_rate": 1.0 - lam,
        "success_ci95": None,
        "errors": errors if lam > 0 else tp.errors,
        # DIAL_MIX stands in for a missing mix: no measured interval goes with it
        "errors_ci95": tp.errors_ci95 if tp.errors or lam == 0 else None,
        "burst": burst,
        "daily_logit_sd": None,
        "daily_logit_sd_ci95": None,
    })  # fmt: skip


class Profile(_Model):
    format: str = FORMAT
    name: str | None = None
    description: str | None = None
    source: dict[str, Any] = Field(default_factory=dict)
    default: ToolProfile | None = None
    tools: dict[str, ToolProfile] = Field(default_factory=dict)
    #: toxics the sandbox applies from the start, by scope (`*`, an API id, a tool name)
    toxics: dict[str, list[Toxic]] = Field(default_factory=dict)
    #: implicit faults by scope (`*` or a tool name; the tool's own entry wins)
    implicit: dict[str, ImplicitFaults] = Field(default_factory=dict)
    #: how failures are drawn call by call: `burst` (the two-state chain), or ResiliBench's
    #: rule as its paper states it or as its code runs it (see docs/faults.md)
    rule: FailureRule = "burst"
    #: simulated calls slower than this end as TIMEOUT (the ResiliBench paper's 30 s)
    call_timeout_s: float | None = Field(default=None, gt=0)
    #: how `realprobe mcp proxy` answers an injected explicit fault: an `isError` tool result
    #: the model reads (`result`, the default), or a JSON-RPC error (`jsonrpc`)
    mcp_errors: Literal["result", "jsonrpc"] | None = None
    #: the MCP request methods `realprobe mcp proxy` injects faults into (default
    #: `tools/call`, and every method named under `tools`, e.g. `"resources/read"`); a
    #: method's faults and latency are its entry under `tools`, else `default`
    mcp_methods: list[str] | None = None

    @field_validator("format")
    @classmethod
    def _known_format(cls, v: str) -> str:
        if v != FORMAT:
            raise ValueError(
                f"unsupported profile format {v!r}; this realprobe reads {FORMAT!r} "
                "(upgrade realprobe for newer profiles)"
            )
        return v

    def for_tool(self, tool: str) -> ToolProfile:
        if tool in self.tools:
            return self.tools[tool]
        if self.default is not None:
            return self.default
        return CALM_TOOL

    def implicit_for(self, tool: str) -> ImplicitFaults | None:
        found = self.implicit.get(tool) or self.implicit.get("*")
        return found if found is not None and found.total > 0 else None

    def scaled(self, lam: float) -> Profile:
        """Every tool's long-run failure share set to `lam` (the fault-injection rate of a
        chaos-style benchmark): error mix and burst correlation kept, latency untouched.
        Tools the profile does not list get the same through `default`. `scaled(0)` never
        fails."""
        if not 0 <= lam <= 1:
            raise ProfileError(f"fault rate {lam!r}: expected a share between 0 and 1")
        if self.rule != "burst":
            return self._scaled_resilibench(lam)
        return self._each_tool(lambda tp: scale_tool(tp, lam), f"@{lam:g}")

    def latency_scaled(self, k: float) -> Profile:
        """Every tool's drawn latencies times `k`, as a sandbox started with
        `--latency-scale k` acts them out (the same draws, so a model of its calls meets the
        very delays it plays)."""
        if k == 1:
            return self

        return self._each_tool(
            lambda tp: tp.model_copy(update={"latency_ms": tp.latency_ms.scaled_by(k)}))

    def _each_tool(self, change: Callable[[ToolProfile], ToolProfile],
                   suffix: str | None = None) -> Profile:
        """Every listed tool and `default` (the calm tool when it has none) changed alike;
        `suffix` appended to the name."""
        update: dict[str, Any] = {
            "tools": {n: change(tp) for n, tp in self.tools.items()},
            "default": change(self.default or CALM_TOOL),
        }
        if suffix is not None:
            update["name"] = f"{self.name or 'profile'}{suffix}"
        return self.model_copy(update=update)

    def _scaled_resilibench(self, lam: float) -> Profile:
        """Under ResiliBench's code rule every tool gets the base rate whose long-run failure
        share (its last-three window and clamp, over the task's calls) is `lam`; the paper's
        rule has no long-run share (each failure lowers success for good)."""
        if self.rule == "resilibench-paper":
            raise ProfileError(
                f"fault rate {lam:g}: rule resilibench-paper has no long-run failure share "
                "(every earlier failure of the task lowers success for good); scale a profile "
                "with rule burst or resilibench-code"
            )
        b, reachable = resilibench_base(1.0 - lam)
        if not reachable:
            raise ProfileError(
                f"fault rate {lam:g}: rule resilibench-code cannot reach it (its clamp to "
                "[0.1, 0.95] keeps the long-run failure share between about 0.05 and 0.9)"
            )
        return self._each_tool(lambda tp: tp.model_copy(update={
            "success_rate": b, "success_ci95": None, "burst": None,
            "errors": dict(tp.errors) or dict(DIAL_MIX), "errors_ci95": None,
        }), f"@{lam:g}")  # fmt: skip

    def dump(self, path: str | Path | None = None) -> str:
        """The profile as JSON text (written to `path` too when given, as `save` does)."""
        if path is not None:
            self.save(path)
        return self.model_dump_json(indent=2, exclude_none=True)

    def save(self, path: str | Path, *, replace: bool = True, private: bool = False) -> Path:
        """Write the profile as a JSON file that `load_profile` reads back, through the one
        output writer (atomic, never through a symbolic link, 0644 under the usual umask;
        `private`: 0600)."""
        text = self.model_dump_json(indent=2, exclude_none=True)
        return write_output(Path(path), text + "\n", replace=replace, private=private)


CALM_TOOL = ToolProfile(success_rate=1.0, latency_ms=LatencyModel(p50=180, p90=420))

BUILTIN_PROFILES = ("calm", "published", "harsh")
#: the profile a simulated target uses when none is named: the one measured from real APIs
DEFAULT_PROFILE = "published"


def builtin_profile(name: str) -> Profile:
    data = resources.files("realprobe.simulator").joinpath("profiles", f"{name}.json")
    return Profile.model_validate_json(data.read_text(encoding="utf-8"))


@checked
def load_profile(ref: str | Path) -> Profile:
    """A profile by built-in name (`calm`, `published`, `harsh`) or by file path."""
    ref_s = str(ref)
    if not ref_s.strip():
        raise ProfileError(
            f"profile {ref_s!r}: name a built-in ({', '.join(BUILTIN_PROFILES)}) or a file"
        )
    if ref_s in BUILTIN_PROFILES:
        return builtin_profile(ref_s)
    path = Path(ref_s)
    if not (path.exists() or path.is_symlink()):
        raise ProfileError(
            f"profile {ref_s!r} is neither a file nor a built-in ({', '.join(BUILTIN_PROFILES)})"
        )
    raw = read_document(path, "profile", "json")
    try:
        return Profile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ProfileError(f"{path}: invalid profile at {where}: {err['msg']}") from exc


ProfileRef = str | Path | Profile


def resolve_profile(ref: ProfileRef | None) -> Profile:
    if ref is None:
        return builtin_profile(DEFAULT_PROFILE)
    if isinstance(ref, Profile):
        return ref
    return load_profile(ref)
