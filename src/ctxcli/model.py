"""Old home of the model types, kept so that plugins written against it still import.

New code imports them from :mod:`ctxcli.stages` (the plugin-facing module) or, inside ctx,
from :mod:`ctxcli.core.model`.
"""

from ctxcli.core.model import *  # noqa: F403
from ctxcli.core.model import __all__ as __all__
