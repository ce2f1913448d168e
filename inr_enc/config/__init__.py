"""Configs: reading them (``files``), checking each key (``checks``) and the run-config schema (``schema``).

``files`` and ``checks`` are the lowest layer of inr_enc; ``schema`` validates a whole run through the encoder and
network registries, so it is imported as ``inr_enc.field.schema`` and not from here.
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
