"""Optional integrations (extras): they import the library; the library never imports them."""
