package dev.spindle.cli;
public class SpindleCli { public static void main(String[] a) { System.out.println("hi"); } }
