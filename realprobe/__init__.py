"""realprobe: measure how real public web APIs behave; replay, simulate and score agents on them.

The front door: `import realprobe` gives what a user needs, loaded on first use so that the
import itself stays cheap (no httpx, numpy or matplotlib until a name is touched)::

    import realprobe

    with realprobe.sandbox_running("calm") as url:
        result = realprobe.call("agify_age", {"name": "michael"},
                                target=realprobe.options(sandbox=url))

The full tour, with examples that the tests run, is docs/api.md (installed with the package:
`realprobe.doc_path("api.md")`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from realprobe.version import PROJECT_URL, USER_AGENT, __version__

if TYPE_CHECKING:
    from realprobe.adapters.adapter import call_tool, call_tool_sync
    from realprobe.adapters.catalog import Catalog, CatalogError, default_catalog
    from realprobe.adapters.spec import ApiSpec, Politeness
    from realprobe.adapters.tool import Tool
    from realprobe.api import (
        build_report,
        calibrate,
        calibrate_export,
        call,
        call_all,
        drift,
        export_profile,
        load_catalog,
        make_report,
        make_sandbox,
        options,
        plan_tasks,
        probe,
        rows,
        run_tasks,
        sandbox_running,
        save_profile,
        schedule,
        serve_mcp,
        stats,
        sweep,
        task_results,
        window,
        write_report,
    )
    from realprobe.api_cassettes import (
        export_cassette,
        import_cassette,
        inspect_cassette,
        record_round,
        replay_round,
        scrub_cassette,
        verify_cassette,
    )
    from realprobe.api_catalog import import_openapi, public_apis, record_fixtures
    from realprobe.api_history import calibrate_imported, import_history, imported_stats
    from realprobe.api_mcp import (
        evaluate,
        mcp_export,
        mcp_import,
        mcp_proxy,
        mcp_replay,
        probe_mcp,
        schedule_mcp,
    )
    from realprobe.api_monitor import check_alerts, merge_databases, serve_exporter
    from realprobe.api_rows import Rows
    from realprobe.cassettes.cassette import Cassette, CassetteError, save_cassette
    from realprobe.cassettes.importers import load_cassette, recover_cassette
    from realprobe.cassettes.session import use_cassette
    from realprobe.clients import TransportOptions, make_client, make_sync_client
    from realprobe.clock import Clock, RealClock, VirtualClock
    from realprobe.data import data_dir, doc_path
    from realprobe.demo import run_demo
    from realprobe.errors import (
        BadArgument,
        BadResponse,
        DeadlineExceeded,
        ErrorCode,
        NoDatabase,
        RealprobeError,
    )
    from realprobe.hosts import HeldBack, HostGates
    from realprobe.http.client import ClientConfig, HttpClient, SyncHttpClient
    from realprobe.http.mode import Mode
    from realprobe.mcp.service import McpService, ServiceOptions
    from realprobe.probes.drift import Drift, DriftReport
    from realprobe.probes.politeness import PolitenessConfig
    from realprobe.probes.results import Stats, VantageStats
    from realprobe.probes.runner import RunSummary, run_probes
    from realprobe.probes.stats import StatsReport
    from realprobe.report.build import ReportData
    from realprobe.result import ToolError, ToolResult
    from realprobe.sandbox.server import Sandbox
    from realprobe.simulator.faults import FaultModel
    from realprobe.simulator.profile import (
        Burst,
        LatencyModel,
        Lognormal,
        MixtureComponent,
        Profile,
        ProfileError,
        RetryAfter,
        ToolProfile,
        load_profile,
    )
    from realprobe.store import Database, Store, open_db
    from realprobe.tasks.batch import TaskBatch, TaskBatchResult
    from realprobe.tasks.model import Task, TaskFileError
    from realprobe.tasks.settings import EvalSettings

#: public name -> the module that defines it
_WHERE: dict[str, str] = {
    # catalogue files
    "import_openapi": "realprobe.api_catalog",
    "record_fixtures": "realprobe.api_catalog",
    "public_apis": "realprobe.api_catalog",
    # imported monitor histories
    "import_history": "realprobe.api_history",
    "imported_stats": "realprobe.api_history",
    "calibrate_imported": "realprobe.api_history",
    # operating probes
    "check_alerts": "realprobe.api_monitor",
    "merge_databases": "realprobe.api_monitor",
    "serve_exporter": "realprobe.api_monitor",
    # cassettes
    "inspect_cassette": "realprobe.api_cassettes",
    "verify_cassette": "realprobe.api_cassettes",
    "scrub_cassette": "realprobe.api_cassettes",
    "import_cassette": "realprobe.api_cassettes",
    "export_cassette": "realprobe.api_cassettes",
    "record_round": "realprobe.api_cassettes",
    "replay_round": "realprobe.api_cassettes",
    "recover_cassette": "realprobe.cassettes.importers",
    # calling tools
    "call": "realprobe.api",
    "call_all": "realprobe.api",
    "call_tool": "realprobe.adapters.adapter",
    "call_tool_sync": "realprobe.adapters.adapter",
    "load_catalog": "realprobe.api",
    "default_catalog": "realprobe.adapters.catalog",
    "Catalog": "realprobe.adapters.catalog",
    "Tool": "realprobe.adapters.tool",
    "ApiSpec": "realprobe.adapters.spec",
    "Politeness": "realprobe.adapters.spec",
    "ToolResult": "realprobe.result",
    "ToolError": "realprobe.result",
    # clients and targets
    "options": "realprobe.api",
    "Mode": "realprobe.http.mode",
    "TransportOptions": "realprobe.clients",
    "make_client": "realprobe.clients",
    "make_sync_client": "realprobe.clients",
    "ClientConfig": "realprobe.http.client",
    "HttpClient": "realprobe.http.client",
    "SyncHttpClient": "realprobe.http.client",
    "Clock": "realprobe.clock",
    "RealClock": "realprobe.clock",
    "VirtualClock": "realprobe.clock",
    # sandbox and profiles
    "make_sandbox": "realprobe.api",
    "sandbox_running": "realprobe.api",
    "Sandbox": "realprobe.sandbox.server",
    "Profile": "realprobe.simulator.profile",
    "load_profile": "realprobe.simulator.profile",
    "ToolProfile": "realprobe.simulator.profile",
    "LatencyModel": "realprobe.simulator.profile",
    "Lognormal": "realprobe.simulator.profile",
    "MixtureComponent": "realprobe.simulator.profile",
    "Burst": "realprobe.simulator.profile",
    "RetryAfter": "realprobe.simulator.profile",
    "FaultModel": "realprobe.simulator.faults",
    "save_profile": "realprobe.api",
    # probing and analysis
    "probe": "realprobe.api",
    "schedule": "realprobe.api",
    "run_probes": "realprobe.probes.runner",
    "HostGates": "realprobe.hosts",
    "HeldBack": "realprobe.hosts",
    "PolitenessConfig": "realprobe.probes.politeness",
    "RunSummary": "realprobe.probes.runner",
    "Store": "realprobe.store",
    "open_db": "realprobe.store",
    "Database": "realprobe.store",
    "stats": "realprobe.api",
    "rows": "realprobe.api_rows",
    "Rows": "realprobe.api_rows",
    "StatsReport": "realprobe.probes.stats",
    "Stats": "realprobe.probes.results",
    "VantageStats": "realprobe.probes.results",
    "calibrate": "realprobe.api",
    "calibrate_export": "realprobe.api",
    "export_profile": "realprobe.api",
    "drift": "realprobe.api",
    "DriftReport": "realprobe.probes.drift",
    "Drift": "realprobe.probes.drift",
    "window": "realprobe.api",
    "build_report": "realprobe.api",
    "write_report": "realprobe.api",
    "make_report": "realprobe.api",
    "ReportData": "realprobe.report.build",
    # cassettes
    "Cassette": "realprobe.cassettes.cassette",
    "load_cassette": "realprobe.cassettes.importers",
    "use_cassette": "realprobe.cassettes.session",
    "save_cassette": "realprobe.cassettes.cassette",
    # tasks
    "run_tasks": "realprobe.api",
    "sweep": "realprobe.api",
    "plan_tasks": "realprobe.api",
    "task_results": "realprobe.api",
    "evaluate": "realprobe.api_mcp",
    "TaskBatch": "realprobe.tasks.batch",
    "TaskBatchResult": "realprobe.tasks.batch",
    "EvalSettings": "realprobe.tasks.settings",
    "Task": "realprobe.tasks.model",
    "TaskFileError": "realprobe.tasks.model",
    # MCP, the demo, docs
    "serve_mcp": "realprobe.api",
    "McpService": "realprobe.mcp.service",
    "ServiceOptions": "realprobe.mcp.service",
    # any MCP server as a target
    "mcp_proxy": "realprobe.api_mcp",
    "mcp_replay": "realprobe.api_mcp",
    "mcp_import": "realprobe.api_mcp",
    "mcp_export": "realprobe.api_mcp",
    "probe_mcp": "realprobe.api_mcp",
    "schedule_mcp": "realprobe.api_mcp",
    "run_demo": "realprobe.demo",
    "doc_path": "realprobe.data",
    "data_dir": "realprobe.data",
    # errors
    "RealprobeError": "realprobe.errors",
    "ErrorCode": "realprobe.errors",
    "BadArgument": "realprobe.errors",
    "NoDatabase": "realprobe.errors",
    "DeadlineExceeded": "realprobe.errors",
    "BadResponse": "realprobe.errors",
    "ProfileError": "realprobe.simulator.profile",
    "CatalogError": "realprobe.adapters.catalog",
    "CassetteError": "realprobe.cassettes.cassette",
}

__all__ = [
    "PROJECT_URL",
    "USER_AGENT",
    "ApiSpec",
    "BadArgument",
    "BadResponse",
    "Burst",
    "Cassette",
    "CassetteError",
    "Catalog",
    "CatalogError",
    "ClientConfig",
    "Clock",
    "Database",
    "DeadlineExceeded",
    "Drift",
    "DriftReport",
    "ErrorCode",
    "EvalSettings",
    "FaultModel",
    "HeldBack",
    "HostGates",
    "HttpClient",
    "LatencyModel",
    "Lognormal",
    "McpService",
    "MixtureComponent",
    "Mode",
    "NoDatabase",
    "Politeness",
    "PolitenessConfig",
    "Profile",
    "ProfileError",
    "RealClock",
    "RealprobeError",
    "ReportData",
    "RetryAfter",
    "Rows",
    "RunSummary",
    "Sandbox",
    "ServiceOptions",
    "Stats",
    "StatsReport",
    "Store",
    "SyncHttpClient",
    "Task",
    "TaskBatch",
    "TaskBatchResult",
    "TaskFileError",
    "Tool",
    "ToolError",
    "ToolProfile",
    "ToolResult",
    "TransportOptions",
    "VantageStats",
    "VirtualClock",
    "__version__",
    "build_report",
    "calibrate",
    "calibrate_export",
    "calibrate_imported",
    "call",
    "call_all",
    "call_tool",
    "call_tool_sync",
    "check_alerts",
    "data_dir",
    "default_catalog",
    "doc_path",
    "drift",
    "evaluate",
    "export_cassette",
    "export_profile",
    "import_cassette",
    "import_history",
    "import_openapi",
    "imported_stats",
    "inspect_cassette",
    "load_cassette",
    "load_catalog",
    "load_profile",
    "make_client",
    "make_report",
    "make_sandbox",
    "make_sync_client",
    "mcp_export",
    "mcp_import",
    "mcp_proxy",
    "mcp_replay",
    "merge_databases",
    "open_db",
    "options",
    "plan_tasks",
    "probe",
    "probe_mcp",
    "public_apis",
    "record_fixtures",
    "record_round",
    "recover_cassette",
    "replay_round",
    "rows",
    "run_demo",
    "run_probes",
    "run_tasks",
    "sandbox_running",
    "save_cassette",
    "save_profile",
    "schedule",
    "schedule_mcp",
    "scrub_cassette",
    "serve_exporter",
    "serve_mcp",
    "stats",
    "sweep",
    "task_results",
    "use_cassette",
    "verify_cassette",
    "window",
    "write_report",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'realprobe' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
