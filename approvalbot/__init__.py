"""The agent-side import name for approvalbot: re-exports only, no logic of its own.

    from approvalbot import Client, require_approval

    async with Client(url, token) as client:
        run = await client.workspace("default").runs.declare(profile="careful")
        await run.call("bash", {"command": "make deploy"})  # waits for a person if it parks

The bridges for the agent frameworks are submodules, each needing its extra:
`approvalbot.langchain` (`pip install approvalbot[langchain]`), `approvalbot.openai_agents`
(`[openai-agents]`) and `approvalbot.claude_agent_sdk` (`[claude-agent-sdk]`). The code lives
in `adapters/http/` (the SDK) and `adapters/frameworks/` (the bridges).
"""

from adapters.http.client import (
    ApiError,
    ApprovalbotError,
    ApprovalDenied,
    ApprovalExpired,
    CallRefused,
    CallWithdrawn,
    Client,
    Decision,
    DeclaredRun,
    QuestionDeclined,
    Run,
    RunStopped,
    Workspace,
    require_approval,
)
from adapters.http.sync_client import SyncClient, SyncDecision, SyncRun, SyncWorkspace

__all__ = [
    "ApiError",
    "ApprovalDenied",
    "ApprovalExpired",
    "ApprovalbotError",
    "CallRefused",
    "CallWithdrawn",
    "Client",
    "Decision",
    "DeclaredRun",
    "QuestionDeclined",
    "Run",
    "RunStopped",
    "SyncClient",
    "SyncDecision",
    "SyncRun",
    "SyncWorkspace",
    "Workspace",
    "require_approval",
]
