"""Before the page's code: the application's customers, 1,000 of them, in app.db."""

from customers import Customer, add_customers

add_customers(1000)
