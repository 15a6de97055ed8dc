"""Before the page's code: the application's customers, 200 of them, in app.db (the
fan-out over 1,000 is the page's first example; here what matters is the handler)."""

from sqlalchemy import String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "customers"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(200))


_engine = create_engine("sqlite:///app.db")
Base.metadata.create_all(_engine)
with Session(_engine) as _session, _session.begin():
    _session.add_all(Customer(id=n, email=f"c{n}@example.com") for n in range(1, 201))
_engine.dispose()
