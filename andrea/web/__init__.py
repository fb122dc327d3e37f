"""What the book's site needs to run ANDREA in the reader's browser: ``export`` (the explorer's
model, book/_static/andrea_flow.js, checked against torch) and ``attention`` (the attention viewer's
files and its place on a page, book/_static/andrea_attention.js)."""
