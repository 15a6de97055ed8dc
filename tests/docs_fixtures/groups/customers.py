"""The application's customers, which the page's examples read: their model, and a
number of them in app.db."""

from sqlalchemy import String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "customers"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(200))


def add_customers(count: int) -> None:
    """The customers table in app.db, with ``count`` customers, numbered from 1."""
    engine = create_engine("sqlite:///app.db")
    Base.metadata.create_all(engine)
    with Session(engine) as session, session.begin():
        session.add_all(Customer(id=n, email=f"c{n}@example.com") for n in range(1, count + 1))
    engine.dispose()
