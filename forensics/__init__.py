"""gpu-forensics: offline log forensics and root-cause analysis for GPU training clusters."""

__version__ = "0.1.0"
