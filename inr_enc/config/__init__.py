"""Configs, the lowest layer of inr_enc: reading them (``files``, ``parsing``), checking each key (``checks``),
the memory limit (``memory``) and the names of the backends (``backends``). The run-config schema, which needs the
encoder and network registries, is a layer up: ``inr_enc.field.schema``.
"""

from .checks import (
                     Registry,
                     check_bool,
                     check_choice,
                     check_float,
                     check_int,
                     check_keys,
                     check_mapping,
                     config_error,
                     lookup_otype,
)
from .files import CONFIG_DIR, available_configs, load_config
from .memory import check_memory, memory_limit, parse_bytes, set_memory_limit

__all__ = ["CONFIG_DIR", "Registry", "available_configs", "check_bool", "check_choice", "check_float", "check_int",
           "check_keys", "check_mapping", "check_memory", "config_error", "load_config", "lookup_otype", "memory_limit",
           "parse_bytes", "set_memory_limit"]
