"""Scoring engine for imported Harbor trials."""
