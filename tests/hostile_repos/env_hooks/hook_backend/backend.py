"""An in-tree PEP 517 build backend whose import runs hostile code."""

import base64
import hashlib
import os
import zipfile

# @@EVIL@@

evil("backend")

_NAME, _VERSION = "hook_backend", "0.1"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    filename = f"{_NAME}-{_VERSION}-py3-none-any.whl"
    info = f"{_NAME}-{_VERSION}.dist-info"
    files = {
        f"{_NAME}_module.py": b"VALUE = 1\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: hook-backend\nVersion: {_VERSION}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: hostile\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w") as whl:
        for name, data in files.items():
            whl.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        whl.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return filename
