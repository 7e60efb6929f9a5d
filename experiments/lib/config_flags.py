"""Flags defined from a config dataclass, and the config built back from them.

One definition serves every binary: a setting's flag has the field's name (or a short
rename), its default and type, and its help (``config.setting_help``: the field's
metadata, or ``config.SETTING_HELP`` for a setting several methods share, with the names
a registry holds).  ``ConfigFlags.build`` reads the flags into the config and validates
it; ``user_error`` is the one translation of a ``ConfigError`` into ``--flag: message``.
"""

from __future__ import annotations

import dataclasses

from absl import flags

from experiments.lib.cli import UserError
from foltr_jax.engine.config import ConfigError, resolved, setting_help

FLAGS = flags.FLAGS

_DEFINE = {
    "int": flags.DEFINE_integer,
    "float": flags.DEFINE_float,
    "str": flags.DEFINE_string,
    "bool": flags.DEFINE_bool,
}


def user_error(error: ConfigError, rename: dict | None = None) -> UserError:
    """``--flag: message`` for a setting out of range (``rename``: field -> flag name)."""
    return UserError(f"--{(rename or {}).get(error.field, error.field)}: {error.message}")


@dataclasses.dataclass(frozen=True)
class ConfigFlags:
    """The flags of ``config_class``'s fields in ``names`` (flag name = rename or field)."""

    config_class: type
    names: tuple
    rename: dict
    defaults: dict  # the binary's paper defaults, where they differ from the config's

    def flag(self, field: str) -> str:
        return self.rename.get(field, field)

    def values(self) -> dict:
        """Field -> the flag's value."""
        return {name: getattr(FLAGS, self.flag(name)) for name in self.names}

    def build(self, validate: bool = True, **fixed):
        """The config from the flags (``fixed`` overrides fields), validated, with what it
        leaves to the backend resolved (``config.resolved``: the results record what ran);
        a bad value is a UserError naming its flag."""
        try:
            config = resolved(self.config_class(**{**self.values(), **fixed}))
            return config.validate() if validate else config
        except ConfigError as error:
            raise user_error(error, self.rename) from None

    def error(self, error: ConfigError) -> UserError:
        return user_error(error, self.rename)


def define(
    config_class,
    *,
    skip=(),
    rename: dict | None = None,
    defaults: dict | None = None,
    help: dict | None = None,
) -> ConfigFlags:
    """Defines a flag for every int, float, str and bool field of ``config_class`` but
    ``skip``: its default the field's (or ``defaults[field]``, a binary's paper default),
    its help ``config.setting_help``'s (or ``help[field]`` where a binary reads the
    setting its own way).  The binary adopts them with
    ``flags.adopt_module_key_flags(config_flags)``."""
    rename, defaults, help = rename or {}, defaults or {}, help or {}
    names = []
    for field in dataclasses.fields(config_class):
        kind = field.type if isinstance(field.type, str) else field.type.__name__
        if field.name in skip:
            continue
        if kind not in _DEFINE:
            raise TypeError(
                f"{config_class.__name__}.{field.name}: no flag for type {kind} (a flag is an "
                "int, float, str or bool)"
            )
        default = defaults.get(field.name, field.default)
        if default is dataclasses.MISSING:
            raise TypeError(
                f"{config_class.__name__}.{field.name}: no default (a flag needs one; a "
                "default_factory is not read)"
            )
        if field.name in FLAGS and field.name not in rename:
            raise TypeError(
                f"{config_class.__name__}.{field.name}: the binary has a flag --{field.name} "
                "of its own; rename the field"
            )
        text = help.get(field.name) or setting_help(config_class, field.name)
        _DEFINE[kind](rename.get(field.name, field.name), default, text)
        names.append(field.name)
    unknown = (set(skip) | set(defaults) | set(help) | set(rename)) - {
        f.name for f in dataclasses.fields(config_class)
    }
    if unknown:
        raise KeyError(f"{config_class.__name__} has no fields {sorted(unknown)}")
    return ConfigFlags(config_class, tuple(names), rename, defaults)
