"""Developer tools, outside the runtime package: run them from the clone's root
(``python -m tests.tools.stubgen``); the tests import them as ``tools``."""
