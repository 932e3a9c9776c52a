# Runs one package test (cmake -P): configures, builds and runs the consumer project beside this
# file with normkit brought in by MODE. For find_package it first installs NORMKIT_BINARY_DIR into
# a fresh prefix, so the test sees exactly what `cmake --install` gives users.
# Inputs (-D): MODE, NORMKIT_SOURCE_DIR, NORMKIT_BINARY_DIR, WORK_DIR, GENERATOR, CONFIG,
# CXX_COMPILER, CXX_FLAGS, EXE_LINKER_FLAGS.
cmake_minimum_required(VERSION 3.21)

file(REMOVE_RECURSE "${WORK_DIR}")

set(consume_args "-DNORMKIT_CONSUME=${MODE}")
if(MODE STREQUAL "find_package")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" --install "${NORMKIT_BINARY_DIR}" --config "${CONFIG}"
            --prefix "${WORK_DIR}/install"
    COMMAND_ECHO STDOUT COMMAND_ERROR_IS_FATAL ANY)
  list(APPEND consume_args "-DCMAKE_PREFIX_PATH=${WORK_DIR}/install")
else()
  list(APPEND consume_args "-DNORMKIT_SOURCE_DIR=${NORMKIT_SOURCE_DIR}")
endif()

execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${CMAKE_CURRENT_LIST_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
          "-DCMAKE_BUILD_TYPE=${CONFIG}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
          "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}"
          ${consume_args}
  COMMAND_ECHO STDOUT COMMAND_ERROR_IS_FATAL ANY)
execute_process(
  COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" --config "${CONFIG}"
  COMMAND_ECHO STDOUT COMMAND_ERROR_IS_FATAL ANY)
execute_process(
  COMMAND "${CMAKE_CTEST_COMMAND}" --test-dir "${WORK_DIR}/build" -C "${CONFIG}"
          --output-on-failure --no-tests=error
  COMMAND_ECHO STDOUT COMMAND_ERROR_IS_FATAL ANY)
