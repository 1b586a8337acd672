from mnemo.cli import main

main()
