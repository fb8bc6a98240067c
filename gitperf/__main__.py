from gitperf.cli import main

main()
