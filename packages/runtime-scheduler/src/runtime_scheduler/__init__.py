"""runtime_scheduler: continuous batching over a paged, prefix-sharing KV cache.

    scheduler = Scheduler(executor, model_max_length=2048, max_total_tokens=slots)
    scheduler.add_request(Request(rid="a", prompt_ids=(1, 2, 3)))   # None, or a Refusal
    while scheduler.has_work():
        for event in scheduler.step():                               # one forward per step
            ...                                                      # token, finish reason, cached tokens

Only KV slot indices live here; the executor (the runner) owns the tensors.
"""

from runtime_scheduler.audit import PageAccountingError
from runtime_scheduler.batch import BatchRequest, ForwardBatch, ForwardMode
from runtime_scheduler.events import Refusal, RequestEvent
from runtime_scheduler.executor import ForwardOutputView, ModelExecutor, VerifiedView
from runtime_scheduler.grammar import GrammarCounts, GrammarEngine, TokenGrammar
from runtime_scheduler.metrics import SchedulerMetrics
from runtime_scheduler.request import FinishReason, OutputConstraint, Request, SamplingParams, StopConditions
from runtime_scheduler.scheduler import Scheduler
from runtime_scheduler.speculation import DraftRequest, Speculator

__all__ = [
    "BatchRequest",
    "DraftRequest",
    "FinishReason",
    "GrammarCounts",
    "GrammarEngine",
    "ForwardBatch",
    "ForwardMode",
    "ForwardOutputView",
    "ModelExecutor",
    "OutputConstraint",
    "PageAccountingError",
    "Refusal",
    "Request",
    "RequestEvent",
    "SamplingParams",
    "Scheduler",
    "SchedulerMetrics",
    "Speculator",
    "StopConditions",
    "TokenGrammar",
    "VerifiedView",
]
