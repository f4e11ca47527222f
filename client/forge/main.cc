// forge: the command-line client. cli.h reads the command line and runs the command.
#include <iostream>
#include <string>
#include <vector>

#include "client/forge/cli.h"

int main(int argc, char** argv) {
  return forge::client::RunForge({argv + 1, argv + argc}, std::cout, std::cerr);
}
