"""cardloop's exceptions, one tree:

    CardloopError                 base: the CLI prints its message and exits non-zero
    ├── ConfigError               config.toml / environment is wrong (exit 2), names the key
    ├── InputError                a card file, template name or argument is wrong (exit 2)
    ├── RejectedError             input was read but refused, e.g. a tenant prompt (exit 1)
    ├── StoreError                the store cannot do what was asked (cardloop.store; exit 2)
    │   └── NotFoundError         a blob, card or summary that is not there
    └── DevStackError             the embedded Temporal dev server cannot start (cardloop.devstack; exit 1)

The prompt core raises its own ValueErrors (prompts.card.CardError,
prompts.templates.TemplateError, prompts.assemble.AssemblyError); the CLI maps them here.
"""

from __future__ import annotations


class CardloopError(Exception):
    exit_code = 2


class ConfigError(CardloopError):
    exit_code = 2


class InputError(CardloopError):
    exit_code = 2


class RejectedError(CardloopError):
    exit_code = 1
