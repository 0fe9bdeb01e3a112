from setuptools import setup

# @@EVIL@@

evil("setup")

setup(name="hook-setup", version="0.1", py_modules=["hook_setup_module"])
