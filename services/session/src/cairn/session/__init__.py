"""The session service: owns sessions and their append-only transcripts."""
