from linkscope.cli.main import main

main()
