"""PASU: hybrid device/cloud speech understanding with pilot inference."""

__version__ = "0.1.0"
