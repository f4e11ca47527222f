"""The build backend of the repository root, so that `pip install .` there installs the Python SDK:
every PEP 517/660 hook is setuptools' own, run in python/, whose pyproject.toml and setup.py
define the package. The root pyproject.toml names this module (backend-path = ["python"]).
"""

import functools
import os
import pathlib

from setuptools import build_meta

_PROJECT = pathlib.Path(__file__).resolve().parent


def _in_project(hook):
    @functools.wraps(hook)
    def run_in_project(*args, **kwargs):
        # The first argument of the build hooks is an output folder, relative to the root.
        if args and isinstance(args[0], str):
            args = (os.path.abspath(args[0]), *args[1:])
        root = os.getcwd()
        os.chdir(_PROJECT)
        try:
            return hook(*args, **kwargs)
        finally:
            os.chdir(root)
    return run_in_project


build_wheel = _in_project(build_meta.build_wheel)
build_sdist = _in_project(build_meta.build_sdist)
build_editable = _in_project(build_meta.build_editable)
get_requires_for_build_wheel = _in_project(build_meta.get_requires_for_build_wheel)
get_requires_for_build_sdist = _in_project(build_meta.get_requires_for_build_sdist)
get_requires_for_build_editable = _in_project(build_meta.get_requires_for_build_editable)
prepare_metadata_for_build_wheel = _in_project(build_meta.prepare_metadata_for_build_wheel)
prepare_metadata_for_build_editable = _in_project(build_meta.prepare_metadata_for_build_editable)
