"""Rendering of the HTML report and the ticket texts from OUT's findings and tables."""
