from rest_core.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
