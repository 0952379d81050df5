"""Operators, one module each, named after the plan node they execute."""
