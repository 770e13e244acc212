"""`resolve(record)`: the ordered, named handlers, run once over a copy of the record, which is
then sealed. The same record (values and provenance) always resolves to the same result."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from config_bags.server import INVARIANTS
from serve.launch_rules import launch_rules
from serve.record.handlers import memory, model, schedule, this_build
from serve.record.resolution import DefaultModel, Resolution
from serve.record.resolved import ResolvedArgs
from serve.record.server_args import ServerArgs
from serve.served_model import ServedModel

Handler = Callable[[Resolution], None]

# Order matters: each handler reads what the ones before it declared (the pool size needs the
# page size; the prefill chunk and budget and the running cap need the pool size). What this build
# cannot run is refused first, before the model's config.json is read.
HANDLERS: tuple[Handler, ...] = (
    this_build.absent_features,
    this_build.attention_backends_run_here,
    this_build.compiled_decode_traceable,
    this_build.deterministic_inference,
    this_build.speculation_as_built,
    this_build.draft_attention_runs_here,
    model.default_model,
    model.safetensors_fit_their_decoder,
    model.task,
    model.quantized_kernels,
    model.quantized_weights_run_here,
    model.gguf_fits_its_decoder,
    model.tokenizer_path,
    model.tokenizer_loads,
    model.served_model_name,
    model.context_length,
    model.tensor_parallel,
    model.linear_attention,
    model.draft_model,
    memory.kv_cache_dtype_attended,
    memory.max_total_tokens,
    schedule.chunked_prefill_size,
    schedule.max_prefill_tokens,
    schedule.max_running_requests,
    schedule.speculative_disable_by_batch_size,
    schedule.speculative_max_drafts_per_step,
)


def handler_names(handlers: Sequence[Handler] = HANDLERS) -> tuple[str, ...]:
    """The names handlers declare under, in the order they run."""
    return tuple(h.__name__ for h in handlers)


def resolve(
    server_args: ServerArgs,
    *,
    default_model: DefaultModel = model.bundled_default_model,
    handlers: Sequence[Handler] = HANDLERS,
) -> ResolvedArgs:
    """Run every handler over a copy of `server_args`, seal it, and check that it projects into valid
    bags that keep every rule the launch publishes (config-bags' invariants and serve's own), so
    the bags publish as resolved. `server_args` itself is left as it was. ResolutionError names the
    leaf and the conflict."""
    res = Resolution(server_args.copy_for_resolution(), default_model)
    for handler in handlers:
        res.running = handler.__name__
        res.running_why = " ".join((handler.__doc__ or "").split())
        handler(res)
    res.running = None
    res.server_args.seal()
    served = ServedModel.of(res.model)
    res.check(*INVARIANTS, *launch_rules(served))
    return ResolvedArgs(server_args=res.server_args, declarations=tuple(res.declarations), served_model=served)
