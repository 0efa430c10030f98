"""Hardware preset topology files (YAML data), installed as ``commsim.presets``."""
