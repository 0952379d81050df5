"""Evaluate the typed expression IR on device columns."""
