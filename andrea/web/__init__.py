"""What the book's site needs to run ANDREA in the reader's browser (book/_static/andrea_flow.js)."""
