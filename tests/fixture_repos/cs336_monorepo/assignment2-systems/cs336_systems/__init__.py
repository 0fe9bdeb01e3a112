"""The next assignment of the course (not graded by the basics profile)."""
