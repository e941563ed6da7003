"""``ARRAY_API_TESTS_MODULE=arraycore_namespace``: the suite against a namespace object,
``arraycore.namespace()`` (of ``$ARRAYCORE_BACKEND``), instead of the ``arraycore`` module.

Importing this module gives the namespace object itself (it replaces its own entry in
``sys.modules``), so the suite's ``import_module`` finds the object a user gets from
``arraycore.namespace(...)`` or ``x.__array_namespace__()``.
"""

import sys

import arraycore

sys.modules[__name__] = arraycore.namespace()
