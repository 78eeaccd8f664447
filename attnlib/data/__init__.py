"""Data for the chapters: generated date pairs (Part II), text utilities, IMDB (Part IV)."""
