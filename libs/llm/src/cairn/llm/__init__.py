"""cairn's one way to ask a language model: an OpenAI-compatible chat-completions client (`ModelClient`), the
deployment's model and tenants' overrides (`Models`), and where an override may point (`override_refusal`)."""

from cairn.llm.client import MAX_RESPONSE_BYTES, ModelClient
from cairn.llm.hosts import canonical_host, override_refusal
from cairn.llm.models import TENANT_CACHE_S, Models
from cairn.llm.replies import ChatResult, ModelError, ModelUnavailable, ToolCall, Usage
from cairn.llm.settings import LlmSettings
from cairn.llm.store import ModelStore, TenantModel, UsageRow
from cairn.llm.usage import UsageReport, WindowError, usage_report, usage_window

__all__ = [
    "MAX_RESPONSE_BYTES",
    "TENANT_CACHE_S",
    "ChatResult",
    "LlmSettings",
    "ModelClient",
    "ModelError",
    "ModelStore",
    "ModelUnavailable",
    "Models",
    "TenantModel",
    "ToolCall",
    "Usage",
    "UsageReport",
    "UsageRow",
    "WindowError",
    "canonical_host",
    "override_refusal",
    "usage_report",
    "usage_window",
]
