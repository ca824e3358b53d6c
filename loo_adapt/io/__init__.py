"""Readers (every input format -> `Draws`) and the Stan CSV writer."""
