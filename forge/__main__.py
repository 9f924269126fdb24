from forge.entry import main

main()
