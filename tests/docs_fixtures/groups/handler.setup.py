"""Before the page's code: the application's customers, 200 of them, in app.db (the
fan-out over 1,000 is the page's first example; here what matters is the handler)."""

from customers import Customer, add_customers

add_customers(200)
