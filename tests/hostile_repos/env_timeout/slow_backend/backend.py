"""An in-tree build backend that never finishes."""

import time

# @@EVIL@@

evil("slow")


def get_requires_for_build_wheel(config_settings=None):
    while True:
        time.sleep(1)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("never reached")
