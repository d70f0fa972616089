// Implementation in progress.
int main() { return 2; }
