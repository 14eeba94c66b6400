"""Loads the shims a harness entry names (TRACE_SHIMS=legacy_api,fake_vision): each is a module of
this directory that changes how the traced script gets its data or its services, never what it does
on the device. Python imports this file at start-up because run.py puts this directory first on
PYTHONPATH."""
import importlib
import os

for _name in filter(None, os.environ.get("TRACE_SHIMS", "").split(",")):
    importlib.import_module(_name)
