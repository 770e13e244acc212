"""The launch record of `serve`: parse (flags > SERVE_* environment > --config file > default),
resolve with named handlers and provenance, seal, and project into `Bags`.

    request = launch_request(sys.argv[1:], os.environ)
    resolved = resolve(request.server_args)
    publish(project(resolved), role="http", rules=launch_rules(resolved.served_model))
"""

from serve.record.errors import ConfigFileError, LaunchInputError, ResolutionError, SealedRecordError
from serve.record.layers import LaunchRequest, env_var_of, launch_request
from serve.record.pipeline import HANDLERS, handler_names, resolve
from serve.record.resolution import Declaration, Resolution
from serve.record.resolved import ResolvedArgs, project
from serve.record.server_args import RecordState, ServerArgs

__all__ = [
    "HANDLERS",
    "ConfigFileError",
    "Declaration",
    "LaunchInputError",
    "LaunchRequest",
    "RecordState",
    "ResolutionError",
    "ResolvedArgs",
    "Resolution",
    "SealedRecordError",
    "ServerArgs",
    "env_var_of",
    "handler_names",
    "launch_request",
    "project",
    "resolve",
]
